package markdown

import "strings"

// hyphenationNames maps a BCP 47 language (primary subtag, or the whole
// tag where a region or script changes the patterns) to the name under
// which TeX Live's language.dat loads its hyphenation patterns into the
// format. \oplanguage falls back to English for a name the installed
// format lacks, so an entry here never makes a render fail.
var hyphenationNames = map[string]string{
	"en": "english", "de": "ngerman", "de-ch": "nswissgerman", "fr": "french",
	"es": "spanish", "it": "italian", "pt": "portuguese", "pl": "polish",
	"cs": "czech", "sk": "slovak", "nl": "dutch", "da": "danish",
	"sv": "swedish", "nb": "norsk", "no": "norsk", "nn": "nynorsk",
	"fi": "finnish", "et": "estonian", "hu": "hungarian", "ro": "romanian",
	"hr": "croatian", "sl": "slovenian", "sr": "serbian", "tr": "turkish",
	"lv": "latvian", "lt": "lithuanian", "ca": "catalan", "eu": "basque",
	"gl": "galician", "is": "icelandic", "ga": "irish", "cy": "welsh",
	"la": "latin", "ru": "russian", "uk": "ukrainian", "bg": "bulgarian",
	"be": "belarusian", "mk": "macedonian", "el": "monogreek",
	"af": "afrikaans", "id": "indonesian", "eo": "esperanto",
}

// hyphenationName returns the TeX hyphenation language for a BCP 47 tag:
// the whole tag's entry, else its primary language's, else English.
func hyphenationName(tag string) string {
	tag = strings.ToLower(tag)
	for {
		if n, ok := hyphenationNames[tag]; ok {
			return n
		}
		i := strings.LastIndexByte(tag, '-')
		if i < 0 {
			return "english"
		}
		tag = tag[:i]
	}
}
