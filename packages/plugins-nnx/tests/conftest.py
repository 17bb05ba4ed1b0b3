import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # precision_checks, shared by the precision tests
