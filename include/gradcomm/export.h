/* GCOMM_API marks the exported C functions of libgradcomm.so; every other symbol
 * of the library is hidden (and cmake/gradcomm.map hides the rest). */
#ifndef GRADCOMM_EXPORT_H
#define GRADCOMM_EXPORT_H

#if defined(GCOMM_BUILDING_LIBRARY) || defined(GCOMM_INTERNAL)
#define GCOMM_API __attribute__((visibility("default")))
#else
#define GCOMM_API
#endif

#endif /* GRADCOMM_EXPORT_H */
