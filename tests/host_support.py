"""What this host's ONNX Runtime computes otherwise than the ops' definition.

On x86 without VNNI, MLAS saturates uint8 x int8 products (exact_products.ort_saturates): a test whose
oracle is ORT's run of such products takes it made exact (exact_products.make_exact, verify.compare's
`exact`) or the ops' definition (onnx.reference) where ORT_SATURATES.
"""

from __future__ import annotations

from hexfuse_onnx.exact_products import ort_saturates

ORT_SATURATES = ort_saturates()
