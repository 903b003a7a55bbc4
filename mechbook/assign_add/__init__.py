"""Part II, Assign and Add (chapters 7-11): the task, the model, training, phases, progress
measures and circuits. Submodules are imported explicitly (``from mechbook.assign_add.task
import Task``) so that importing the package stays cheap."""
