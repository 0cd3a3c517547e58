"""Checkpoints: what a resume in another process relies on."""

from __future__ import annotations

import subprocess
import sys

FINGERPRINT_OF_STRING_LABELS = """
import numpy as np
from dsvm.checkpoint import _fingerprint_block
X = np.ones((4, 2))
y = np.array(["spam", "ham", "spam", "ham"], dtype=object)
print(repr(_fingerprint_block(X, y, np.arange(4), None).tolist()))
"""


def test_fingerprint_of_string_labels_is_the_same_in_every_process():
    """With Python's randomised str hash, a resumed fit with string labels was always 'other data'."""
    runs = {subprocess.run([sys.executable, "-c", FINGERPRINT_OF_STRING_LABELS], capture_output=True, text=True,
                           check=True, timeout=120).stdout for _ in range(2)}
    assert len(runs) == 1, runs
