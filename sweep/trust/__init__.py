"""How far to trust the model: validation against measured runs, and calibration of a
machine profile's parameters on them.
"""
