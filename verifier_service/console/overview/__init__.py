"""The console's overview and its jobs: throughput, rewards, tiers, cost and queues over a window
(from the minute and hour rollups), the job search, a job's page and its Cancel form."""
