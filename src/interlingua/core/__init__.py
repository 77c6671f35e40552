"""What every layer stands on: errors, the store, table schemas, output folders, numerics, builds, config bases."""
