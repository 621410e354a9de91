"""What a sweep is made of, read from files and checked: models and their architectures, machine
profiles, sweep specs (grids of jobs), measured-run files, and the rules of a configuration.
"""
