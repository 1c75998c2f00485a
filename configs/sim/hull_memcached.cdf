# HULL's dynamic workload (specs/dc.md §6.3, Tables 4.4 and 4.5): 80 % of requests for 1 KB and
# 20 % for 10 MB. Two point masses: the CDF steps at each size (equal sizes, rising probability).
1000 0.0
1000 0.8
10000000 0.8
10000000 1.0
