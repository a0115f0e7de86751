/* json_format.c - the `format` names the JSON Schema compiler asserts, each as an anchored
 * regex over the string's characters (RFC 3339 date/time, RFC 4122 uuid, dotted IPv4, RFC 4291
 * IPv6 text forms, a practical email and hostname, URI per RFC 3986's grammar). Where a format
 * cannot be decided by a regular language the regex is stricter, never looser: leap seconds (:60)
 * and IDNA A-labels (xn--) are refused; Feb 29 is checked against the Gregorian leap-year rule. */
#include <string.h>

#include "grammar/json_schema.h"

#define DEC_OCTET "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define IPV4 DEC_OCTET "\\." DEC_OCTET "\\." DEC_OCTET "\\." DEC_OCTET
#define H16 "[0-9a-fA-F]{1,4}"
#define LS32 "(" H16 ":" H16 "|" IPV4 ")"
#define IPV6                                                                                                     \
    "((" H16 ":){6}" LS32 "|::(" H16 ":){5}" LS32 "|(" H16 ")?::(" H16 ":){4}" LS32 "|((" H16 ":){0,1}" H16      \
    ")?::(" H16 ":){3}" LS32 "|((" H16 ":){0,2}" H16 ")?::(" H16 ":){2}" LS32 "|((" H16 ":){0,3}" H16 ")?::" H16 \
    ":" LS32 "|((" H16 ":){0,4}" H16 ")?::" LS32 "|((" H16 ":){0,5}" H16 ")?::" H16 "|((" H16 ":){0,6}" H16 ")?::)"
#define LEAP_YEAR "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
#define DATE                                                                                                           \
    "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8])" \
    ")"                                                                                                                \
    "|" LEAP_YEAR "-02-29)"
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define AN "[a-zA-Z0-9]"
#define AH "[a-zA-Z0-9-]"
/* a DNS label (1-63 chars, no leading/trailing '-', no "--" at positions 3-4: that form is an
 * IDNA A-label, whose Punycode rules a regex cannot check, so it is refused) */
#define LABEL_UPTO(k) \
    "(" AN "|" AN AN "|" AN AH AN "|" AN AH AH AN "|" AN AH "(" AN AH "|-" AN ")" AH "{0," #k "}" AN ")"
#define LABEL LABEL_UPTO(58) /* up to 63 characters */
/* a hostname is at most 253 characters: refused beyond 8 labels of up to 30 characters or 4 of up
 * to 62 (a regular bound on the total length; longer valid names are refused, never accepted) */
#define HOSTNAME "(" LABEL_UPTO(25) "(\\." LABEL_UPTO(25) "){0,7}|" LABEL_UPTO(57) "(\\." LABEL_UPTO(57) "){0,3})"
#define UNRESERVED "[a-zA-Z0-9._~-]"
#define PCT "%[0-9a-fA-F]{2}"
#define SUB_DELIMS "[!$&'()*+,;=]"
#define PCHAR "(" UNRESERVED "|" PCT "|" SUB_DELIMS "|[:@])"
#define AUTHORITY                                                                                                      \
    "((" UNRESERVED "|" PCT "|" SUB_DELIMS "|:)*@)?(\\[" IPV6 "\\]|(" UNRESERVED "|" PCT "|" SUB_DELIMS ")*)(:[0-9]*)" \
    "?"
#define URI                                                                                                  \
    "[a-zA-Z][a-zA-Z0-9+.-]*:(//" AUTHORITY "(/" PCHAR "*)*|/(" PCHAR "+(/" PCHAR "*)*)?|" PCHAR "+(/" PCHAR \
    "*)*)?(\\?(" PCHAR "|[/?])*)?(#(" PCHAR "|[/?])*)?"

static const struct {
    const char *name, *regex;
} formats[] = {
    {"date-time", "^" DATE "[tT]" TIME "$"},
    {"date", "^" DATE "$"},
    {"time", "^" TIME "$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"ipv4", "^" IPV4 "$"},
    {"ipv6", "^" IPV6 "$"},
    {"email", "^[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)*@" LABEL "(\\." LABEL ")*$"},
    {"hostname", "^" HOSTNAME "$"},
    {"uri", "^" URI "$"},
};

const char *js_format_regex(const char *format) {
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, format)) return formats[i].regex;
    return NULL;
}
