"""Collection settings for the whole repository (tests and docstring examples)."""

import importlib.util

# Docstring examples of optional heavy learners run only where their library is installed.
collect_ignore_glob = []
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob += ["learners/torch.py", "learners/modules.py", "learners/lm/gpt2.py"]
if importlib.util.find_spec("transformers") is None:
    collect_ignore_glob += ["learners/lm/gpt2.py"]
