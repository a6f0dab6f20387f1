print("offer-load: not yet")
