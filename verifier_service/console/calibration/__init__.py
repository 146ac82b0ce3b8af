"""The console's calibration: per audited gate, the cheap tier against the tier above."""
