#!/usr/bin/env bash
# memarea's shared libraries export their public API and nothing else, as `nm -DC --defined-only`
# lists it:
#   memarea=LIB  libmemarea: the C functions memarea_* of
#                include/memarea/{memarea,context,report,torch}.h and C++ symbols of namespace
#                memarea (not memarea::mpi)
#   aml=LIB      libmemarea-aml: the C functions and data aml_*, buddy_allocator_* (AML's
#                low-level buddy) and memarea_aml_* of include/memarea-aml; no C++ symbol
#   mpi=LIB      libmemarea_mpi: the C functions memarea_mpi_* of include/memarea/mpi.h and C++
#                symbols of namespace memarea::mpi
# A C++ symbol is a function or variable of its namespace, or what the compiler makes for a
# public class there: its typeinfo (so that a program catches memarea::error), typeinfo name,
# vtable, thunks and guard variables. None may name a detail, impl or internal namespace or
# type, even in a parameter, nor an anonymous namespace. Every exported C symbol must be
# declared in the library's public headers, and every C function they declare exported; every
# public header marks its declarations default (the visibility pragma pair).
#   exports.sh INCLUDE_DIR KIND=LIB...
set -euo pipefail
include=$1
shift

# The C names that headers declare: identifiers matching the regex $1, outside comments and
# preprocessor lines, followed by "(" (a function; not a static one, nor a function pointer's
# return type) or ending an extern declaration (data).
declared() {
  local names=$1
  shift
  perl -0777 -ne '
    s{/\*.*?\*/}{}gs; s{//[^\n]*}{}g; s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}mg;
    $static{$1} = 1 while /\bstatic\b[^;{}()]*?\b('"$names"'\w*)\s*\(/g;
    $name{$1} = 1 while /\b('"$names"'\w*)\s*\((?!\s*\*)/g;
    $name{$1} = 1 while /\bextern\s+(?!")[^;{}()"]*?\b('"$names"'\w*)\s*(\[[^\]]*\])?\s*;/g;
    END { print "$_\n" for grep { !$static{$_} } sort keys %name }' "$@"
}

status=0
check() {
  local kind=$1 lib=$2 c_names cxx_space headers=()
  case $kind in
    memarea)
      c_names='memarea_' cxx_space='memarea::(?!mpi::)'
      headers=("$include/memarea/memarea.h" "$include/memarea/context.h" "$include/memarea/report.h" "$include/memarea/torch.h") ;;
    aml)
      c_names='(aml_|buddy_allocator_|memarea_aml_)' cxx_space=''
      mapfile -t headers < <(find "$include/memarea-aml" -name '*.h' | sort) ;;
    mpi)
      c_names='memarea_mpi_' cxx_space='memarea::mpi::'
      headers=("$include/memarea/mpi.h") ;;
    *) echo "exports.sh: unknown library kind '$kind'" >&2; return 1 ;;
  esac
  # "ADDRESS TYPE NAME": the name, which may hold spaces.
  local exported
  exported=$(nm -DC --defined-only "$lib" | sed -E 's/^[0-9a-f]+ [A-Za-z] //')
  if [[ -z $exported ]]; then
    echo "exports.sh: $lib exports nothing" >&2
    return 1
  fi
  local c_exported cxx_exported bad=""
  # A C symbol is one word; a C++ one (demangled) holds "::".
  c_exported=$(grep -v '::' <<<"$exported" || true)
  cxx_exported=$(grep '::' <<<"$exported" || true)
  # C symbols: the library's prefix, and declared in its headers.
  local decl
  decl=$(declared "$c_names" "${headers[@]}")
  while IFS= read -r sym; do
    [[ -z $sym ]] && continue
    if ! grep -qxE "${c_names}[A-Za-z0-9_]*" <<<"$sym"; then
      bad+="$sym (not a public C name of this library)"$'\n'
    elif ! grep -qxF "$sym" <<<"$decl"; then
      bad+="$sym (declared in no public header)"$'\n'
    fi
  done <<<"$c_exported"
  # C++ symbols: the library's namespace, or the compiler's tables of its classes.
  if [[ -n $cxx_exported ]]; then
    local outside
    if [[ -z $cxx_space ]]; then
      outside=$cxx_exported
    else
      outside=$(grep -vP "^((typeinfo name|typeinfo|vtable|VTT|guard variable) for |(non-)?virtual thunk to )?${cxx_space}" \
                  <<<"$cxx_exported" || true)
    fi
    [[ -n $outside ]] && bad+=$(sed 's/$/ (outside the public namespace)/' <<<"$outside")$'\n'
  fi
  # Nothing internal, even as a parameter's or a template argument's type.
  local internal
  internal=$(grep -E '(^|[^A-Za-z0-9_])(detail|impl|internal)([^A-Za-z0-9]|$)|_impl([^A-Za-z0-9_]|$)|[a-z]_internal|anonymous namespace' \
               <<<"$exported" || true)
  [[ -n $internal ]] && bad+=$(sed 's/$/ (internal)/' <<<"$internal")$'\n'
  # Every C function the headers declare is exported (a declaration nothing defines fails).
  local missing
  missing=$(comm -23 <(grep -E "^${c_names}" <<<"$decl" | sort -u) <(sort -u <<<"$c_exported"))
  [[ -n $missing ]] && bad+=$(sed 's/$/ (declared in a public header, not exported)/' <<<"$missing")$'\n'

  bad=$(sed '/^$/d' <<<"$bad")
  if [[ -n $bad ]]; then
    echo "exports.sh: FAIL: $lib exports what is not its public API, or misses some of it:" >&2
    head -40 <<<"$bad" >&2
    echo "($(wc -l <<<"$bad") in all)" >&2
    return 1
  fi
  echo "exports.sh: $(basename "$lib"): $(wc -l <<<"$c_exported") C symbols, all declared in" \
       "its headers, and $(grep -c . <<<"$cxx_exported" || true) C++ symbols, all of its" \
       "public namespace; none internal"
}

for arg in "$@"; do
  check "${arg%%=*}" "${arg#*=}" || status=1
done

# A public header without the pragma pair hides what it declares from every program: a new
# header fails here before a user's link does.
while IFS= read -r header; do
  if ! grep -qx '#pragma GCC visibility push(default)' "$header" ||
     ! grep -qx '#pragma GCC visibility pop' "$header"; then
    echo "exports.sh: FAIL: $header lacks '#pragma GCC visibility push(default)' ... pop" >&2
    status=1
  fi
done < <(find "$include" -name '*.h' -o -name '*.hpp' | sort)
exit $status
