"""The numbers: similarity measures, statistical inference, statistics, typology."""
