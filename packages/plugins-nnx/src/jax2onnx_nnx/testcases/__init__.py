"""Test-only code of the pack: testcase modules that own no lowering (``cases.models``: whole
models, listed in the pack's ``plugin.py`` like any module with ``components``) and the helpers
testcases share (``cases.helpers``). Nothing here is imported by an export."""
