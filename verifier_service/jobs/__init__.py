"""Jobs: submissions of items and the rewards they get."""
