"""The console's pages for the people side of the ladder: gold items, adjudication of tasks
whose reviewers disagreed, and pausing a reviewer (before: the JSON API only)."""
