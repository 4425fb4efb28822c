"""Reading logs (SPEC 7.1, 7.3): the JSONL codec (`codec`), the load pipeline
(`pipeline`), the fast reader's schema and checks (`fast`), its lazy sequences
(`sequences`) and the frames' column pass (`columns`), and `read_log` (`read`).

Nothing is imported here, so that `storage` (which runs the pipeline) and `read`
(which opens stores) can import these modules without a cycle.
"""
