import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # trained_lm, the tiny LM of the precision test (and bench/precision_bench.py)
