"""The console's policy pages: versions side by side, the draft editor, replay, activate and
roll back."""
