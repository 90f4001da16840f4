"""gather: run directories -> one typed Parquet table per study. gather.base is what every
study shares; one module per study builds on it alone; gather.studies knows them all (for
verify --deep). Imports the layers below (evidence, run, campaigns, inputs, core)."""
