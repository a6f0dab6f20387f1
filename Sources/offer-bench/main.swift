print("offer-bench: not yet")
