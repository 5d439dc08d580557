import sys
from pathlib import Path

# Test helpers (tests/*.py that are not tests) import by name.
sys.path.insert(0, str(Path(__file__).parent))
