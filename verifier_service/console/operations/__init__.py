"""The console's operations: queues and workers (pause, resume, drain), a job's retry, reviewers."""
