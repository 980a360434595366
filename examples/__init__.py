"""Examples of code a product team writes on top of the fleet (not part of the kernel)."""
