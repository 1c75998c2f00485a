# HULL TCP-QoS low-priority class (specs/dc.md §6.3, Table 4.5): every request is for 10 MB.
10000000 0.0
10000000 1.0
