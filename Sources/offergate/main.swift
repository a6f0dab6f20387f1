print("offergate: not yet")
