"""Part II's exercises (mechbook.exercises.part2) in a fresh process: transformer_lens is imported
only when a model check runs."""


def test_part_two_imports_transformer_lens_only_when_a_model_check_runs():
    """Part II's exercises import TransformerLens (seconds) when a model-based check runs, not on
    import (Part I's exercise module is left out of the measure: it has its own imports)."""
    import subprocess
    import sys

    code = (
        "import sys, types; sys.modules['mechbook.exercises.part1'] = types.SimpleNamespace(EXERCISES=()); "
        "import mechbook.exercises.part2 as p; before = 'transformer_lens' in sys.modules; "
        "p.tiny_model(p.tiny_task(), 0); print(before, 'transformer_lens' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
