"""The console's oracle pages: each oracle's capacity, in-flight items, turnaround, overdue
batches and latest results; pause and resume an oracle, resend a batch."""
