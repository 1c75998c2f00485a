# HULL TCP-QoS high-priority class (specs/dc.md §6.3, Table 4.5): every request is for 1 KB.
1000 0.0
1000 1.0
