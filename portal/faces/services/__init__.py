"""Faces: the detection job (``detection``), the stored detections read back (``stored``) and the ethics officers'
review (``review``)."""
