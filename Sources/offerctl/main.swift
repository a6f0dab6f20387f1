print("offerctl: not yet")
