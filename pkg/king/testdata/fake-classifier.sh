#!/bin/sh
# A fake `soldier-spawn petition` for tests. Usage:
#   fake-classifier.sh MODE petition --base-dir B --event ID --prompt F --out O --timeout-seconds N
# MODE: general:<name> | direct | garbage | nothing | slow:<name> | error
mode="$1"; shift
[ "$1" = petition ] || exit 2
shift
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="$2"; shift ;;
	--prompt) prompt="$2"; shift ;;
	esac
	shift
done
[ -r "$prompt" ] || exit 3
publish() {
	tmp="$(dirname "$out")/.tmp-fake-$$"
	printf '%s' "$1" > "$tmp" && mv "$tmp" "$out"
}
case "$mode" in
general:*) publish "{\"general\":\"${mode#general:}\"}" ;;
slow:*) sleep 1; publish "{\"general\":\"${mode#slow:}\"}" ;;
direct) publish '{"direct_response":"It is 42."}' ;;
garbage) publish 'I think gen-pr, maybe?' ;;
nothing) exit 1 ;;
error) publish '{"error":"petition engine failed (EngineError): API error status 400; Credit balance is too low"}'; exit 1 ;;
esac
