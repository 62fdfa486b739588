"""Curriculum signals between the models and the memory: answers and votes (Sec. 2.2),
double-confidence filtering (Eq. 3), the challenger reward (Eq. 8-10), generation prompts
(Appendix J) and question statistics, one module each."""
