"""The diagnostician (Sec. 2.3, Appendix J): Prompts 1-4 over an LLM client, the embedders, the
routing of each failure into the memory, and the pipeline that runs them over a round."""
