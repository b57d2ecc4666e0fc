"""The workloads run against each broker; each returns plain numbers for report.py."""
