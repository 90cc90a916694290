"""The Sampling chapter: cumulative ranges on [0, 1), seeded draws, the thousand-draw histogram with its χ² verdict, and the sampling controls every generating page shares."""
