"""The pipeline: config -> preflight -> plan -> execute -> assemble, the registry of capabilities, the executors."""
