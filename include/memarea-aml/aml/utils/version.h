/* memarea's AML drop-in: the AML API version it implements (aml/utils/version.h). */
#ifndef AML_VERSION_H
#define AML_VERSION_H 1

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

#define AML_VERSION_MAJOR 0        /**< AML's major version whose API this is */
#define AML_VERSION_MINOR 2        /**< its minor version */
#define AML_VERSION_PATCH 1        /**< its patch version */
#define AML_VERSION_REVISION "memarea" /**< the implementation: memarea's drop-in */
#define AML_VERSION_STRING "0.2.1" /**< the three numbers as text */

extern const int aml_version_major;        /**< AML_VERSION_MAJOR, from the library */
extern const int aml_version_minor;        /**< AML_VERSION_MINOR, from the library */
extern const int aml_version_patch;        /**< AML_VERSION_PATCH, from the library */
extern const char *aml_version_revision;   /**< AML_VERSION_REVISION, from the library */
extern const char *aml_version_string;     /**< AML_VERSION_STRING, from the library */

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_VERSION_H */
