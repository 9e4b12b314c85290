"""Helpers shared by every test folder: span builders, free ports, a real `ett serve` process and
the worked example's figures. Import as ``tests.support.<module>`` (pytest's ``pythonpath``)."""
