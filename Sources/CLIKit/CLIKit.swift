// CLIKit: placeholder until its issue fills it.
import Foundation

enum CLIKitModule {}
