"""Where results go: the Parquet part files, their schema and metadata, the dataset folder and
its manifest, and the names of every file in it.
"""
