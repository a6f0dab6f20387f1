// posix_spawn's "close every descriptor from N" file action (glibc 2.34+), which Swift's Glibc module does not
// export (glibc declares it only under _GNU_SOURCE/__USE_MISC). A child spawned with it inherits exactly the
// descriptors its file actions name, whatever other threads of the parent have open at that moment.
#ifndef OFFERGATE_CSPAWN_SHIM_H
#define OFFERGATE_CSPAWN_SHIM_H

#include <spawn.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

#endif
