// OfferDomain: placeholder until its issue fills it.
import Foundation

enum OfferDomainModule {}
