"""Test-only code of the pack: testcase modules too long to sit beside their lowering
(``cases.attention``, listed in the pack's ``plugin.py`` like any module with ``components``) and
the helpers testcases share (``cases.helpers``). Nothing here is imported by an export."""
