/// A realistic Xcode StoreKit configuration file (`AcmeFitness.storekit`, format version 4): one subscription group
/// with a monthly and a yearly plan, introductory, promotional and win-back offers, and a consumable that
/// `catalog.import` skips. Embedded as a string because the test target declares no resources; save it as
/// `AcmeFitness.storekit` to open it in Xcode.
enum StoreKitFixtures {
    static let acmeFitness = #"""
        {
          "identifier" : "4F6E2D1A",
          "nonRenewingSubscriptions" : [

          ],
          "products" : [
            {
              "displayPrice" : "0.99",
              "familyShareable" : false,
              "internalID" : "6450000001",
              "localizations" : [
                {
                  "description" : "100 coins",
                  "displayName" : "Coins",
                  "locale" : "en_US"
                }
              ],
              "productID" : "com.acme.fitness.coins100",
              "referenceName" : "100 Coins",
              "type" : "Consumable"
            }
          ],
          "settings" : {
            "_applicationInternalID" : "6450000000",
            "_developerTeamID" : "ABCDE12345",
            "_failTransactionsEnabled" : false,
            "_locale" : "en_US",
            "_storefront" : "USA",
            "_storeKitErrors" : [

            ]
          },
          "subscriptionGroups" : [
            {
              "id" : "21500001",
              "localizations" : [

              ],
              "name" : "Acme Premium",
              "subscriptions" : [
                {
                  "adHocOffers" : [
                    {
                      "displayPrice" : "4.99",
                      "internalID" : "6450000011",
                      "numberOfPeriods" : 3,
                      "offerID" : "com.acme.fitness.monthly.comeback",
                      "paymentMode" : "payAsYouGo",
                      "referenceName" : "Come back: half price for 3 months",
                      "subscriptionPeriod" : "P1M"
                    },
                    {
                      "internalID" : "6450000012",
                      "numberOfPeriods" : 1,
                      "offerID" : "com.acme.fitness.monthly.freemonth",
                      "paymentMode" : "free",
                      "referenceName" : "One month free",
                      "subscriptionPeriod" : "P1M"
                    }
                  ],
                  "codeOffers" : [

                  ],
                  "displayPrice" : "9.99",
                  "familyShareable" : false,
                  "groupNumber" : 2,
                  "internalID" : "6450000010",
                  "introductoryOffer" : {
                    "internalID" : "6450000013",
                    "numberOfPeriods" : 1,
                    "paymentMode" : "free",
                    "subscriptionPeriod" : "P1W"
                  },
                  "localizations" : [
                    {
                      "description" : "All workouts, every month",
                      "displayName" : "Premium Monthly",
                      "locale" : "en_US"
                    }
                  ],
                  "productID" : "com.acme.fitness.monthly",
                  "recurringSubscriptionPeriod" : "P1M",
                  "referenceName" : "Premium Monthly",
                  "subscriptionGroupID" : "21500001",
                  "type" : "RecurringSubscription",
                  "winbackOffers" : [
                    {
                      "displayPrice" : "19.99",
                      "internalID" : "6450000014",
                      "numberOfPeriods" : 1,
                      "offerID" : "com.acme.fitness.monthly.winback",
                      "paymentMode" : "payUpFront",
                      "referenceName" : "Win back: 3 months for $19.99",
                      "subscriptionPeriod" : "P3M",
                      "customerEligibilityPaidSubscriptionDurationInMonths" : 3,
                      "customerEligibilityTimeSinceLastSubscribedInMonths" : { "minimum" : 2, "maximum" : 12 },
                      "customerEligibilityWaitBetweenOffersInMonths" : 6
                    }
                  ]
                },
                {
                  "adHocOffers" : [
                    {
                      "displayPrice" : "29.99",
                      "internalID" : "6450000021",
                      "numberOfPeriods" : 1,
                      "offerID" : "com.acme.fitness.yearly.halfyear",
                      "paymentMode" : "payUpFront",
                      "referenceName" : "Six months for $29.99",
                      "subscriptionPeriod" : "P6M"
                    }
                  ],
                  "codeOffers" : [

                  ],
                  "displayPrice" : "79.99",
                  "familyShareable" : true,
                  "groupNumber" : 1,
                  "internalID" : "6450000020",
                  "introductoryOffer" : {
                    "internalID" : "6450000022",
                    "numberOfPeriods" : 1,
                    "paymentMode" : "free",
                    "subscriptionPeriod" : "P2W"
                  },
                  "localizations" : [
                    {
                      "description" : "All workouts, a whole year",
                      "displayName" : "Premium Yearly",
                      "locale" : "en_US"
                    }
                  ],
                  "productID" : "com.acme.fitness.yearly",
                  "recurringSubscriptionPeriod" : "P1Y",
                  "referenceName" : "Premium Yearly",
                  "subscriptionGroupID" : "21500001",
                  "type" : "RecurringSubscription"
                }
              ]
            }
          ],
          "version" : {
            "major" : 4,
            "minor" : 0
          }
        }
        """#
}
