"""run: one cell under its memory limit: the harness (residency run), the cgroup (v1 and v2),
swap and the reclaim pressure of P3, the NVML observer, the calibrated overhead O and reserve
R. Imports core only."""
