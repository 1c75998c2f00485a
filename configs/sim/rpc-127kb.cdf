# Fixed-size RPCs of 127 KB (the Annulus testbed, specs/annulus.md §9.3).
0 0
126999 0
127000 1
