#compdef cutout
#
# zsh completion for cutout
#
# Install: copy this file as `_cutout` into a directory of $fpath (before compinit runs), or run:
#   source <(cutout completion zsh)

_cutout_help_opts=(
  '(- *)'{-h,--help}'[show help]'
)

# >>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit
_cutout_image_opts=(
  '--size=[output size]:size:(preview full auto)'
  '--format=[output encoding]:format:(png webp jpg gif auto zip)'
  '--bg-color=[background: transparent, a hex colour or a CSS name]:color:(transparent)'
  '--crop[crop to the subject'"'"'s bounding box]'
  '--quality=[speed against quality]:quality:(fast balanced best max)'
  '--precision=[model number format (int8 on VNNI CPUs)]:precision:(auto fp32 int8)'
  '--mask[write the alpha matte alone]'
  '--alpha=[soft matte, or hard (thresholded) for stickers and icons]:mode:(soft hard)'
  '--no-refine[plain bilinear matte, no guided refinement]'
  '--no-decontaminate[keep the original colours at soft edges]'
  '--crop-margin=[margin around the crop, px or %]:margin: '
  '--roi=[only this rectangle may hold the subject: x1 y1 x2 y2]:rect: '
  '--scale=[share of the canvas the subject fills]:percent:(original)'
  '--position=[where the subject goes]:where:(original center)'
  '--bg-image=[background picture: a file or URL]:file or url:_files'
  '--keep-alpha=[keep an input'"'"'s own transparency]:mode:(never auto)'
  '--canvas=[output canvas: WxH, original or subject]:size:(1000x1000 original subject)'
  '--max-width=[largest width of an original or subject canvas]:px: '
  '--max-height=[largest height of an original or subject canvas]:px: '
  '--padding=[space around the subject: 1-4 of NNpx, NN% or 0-0.49]:space:(10% 0.1 40px)'
  '--margin=[space inside the canvas edge, never ignored]:space:(5% 20px)'
  '--align=[where the subject goes on the canvas]:where:(center top bottom left right)'
  '--scaling=[fit the subject inside, or fill the room]:mode:(fit fill)'
  '--snap-cropped=[cropped sides snap to the canvas edge]:bool:(true false)'
  '--outline-width=[outline around the subject: NNpx or 0-0.1]:width:(8px 0.01)'
  '--outline-color=[outline colour]:color: '
  '--outline-blur=[outline blur (glow): 0-0.025]:ratio: '
  '--shadow=[shadow under the subject]:[mode]:(none drop float cast)'
  '--shadow-opacity=[shadow opacity 0-1]:0-1: '
  '--shadow-softness=[shadow softness 0-1]:0-1: '
  '--shadow-direction=[light direction in degrees (0: shadow below)]:degrees: '
  '--shadow-elevation=[cast shadow light elevation 5-85 degrees]:degrees: '
  '--shadow-color=[shadow colour]:color: '
  '--bg-blur=[blur the photo'"'"'s own background: true or 0-0.05]:radius:(true 0.01 0.03)'
  '--bg-blur-mode=[background blur kind]:mode:(gaussian bokeh)'
  '--dpi=[pixel density 72-1200]:dpi:(72 300)'
  '--keep-metadata[keep the input'"'"'s EXIF, XMP and colour profile]'
  '--animation=[animated input: every frame or the first]:mode:(keep first)'
)
# <<< image flags

# >>> command flags: written from the settings table and the commands (src/settings.ts, src/commands/) by `npm run completions`; do not edit
_cutout_opts_remove=(
  '(-o --out)'{-o+,--out=}'[output directory, or a file when there is one input]:path:_files'
  '(-c --concurrency)'{-c+,--concurrency=}'[images processed at once]:n: '
  '--model=[a model from `cutout models list`, or an .onnx file with its manifest]:name or file:_files'
  '(-r --recursive)'{-r,--recursive}'[descend into sub-directories of directory inputs]'
  '--include-outputs[take named files that look like cutout'"'"'s outputs]'
  '--skip-existing[skip inputs whose output exists]'
  '--overwrite[replace existing outputs]'
  '--json[one JSON object per input on stdout (with each cutout'"'"'s confidence)]'
  '--review-below=[flag each cutout whose confidence]:t: '
  '--key=[charge that key'"'"'s credits by the same rules as the server]:api_key: '
  '--inference-workers=[inference worker threads, each with its own session]:n: '
  '--inference-threads=[intra-op threads of each session]:n: '
  '(-q --quiet)'{-q,--quiet}'[no progress output]'
  '--no-progress[no spinner or progress lines]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
  '--manifest=[a JSON-lines record of each input handled]:file:_files'
  '--force[with --manifest: redo every input]'
  '--watch[after the inputs, keep watching the input folders and process each new or changed image once completely written, until Ctrl-C]'
  '*--exclude=[leave out matching inputs (repeatable)]:glob: '
  '--dry-run[print what would be processed and what skipped, with counts]'
)
_cutout_opts_models_list=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--json[JSON output]'
)
_cutout_opts_models_verify=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--json[JSON output]'
)
_cutout_opts_models_pull=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--no-variants[skip the smaller-input copies for --quality fast and balanced and the int8 copy]'
)
_cutout_opts_models_export=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--triton=[the model repository to write]:dir:_directories'
  '--no-variants[skip the smaller-input models for --quality fast and balanced]'
)
_cutout_opts_serve=(
  '--data=[data directory: the SQLite database, results, generated secrets]:dir:_directories'
  '--config=[config file]:file:_files'
  '--model=[the model]:name or file:_files'
  '--inference-workers=[inference worker threads, each with its own session]:n: '
  '--inference-threads=[intra-op threads of each session]:n: '
  '--precision=[auto | fp32 | int8: the default precision]:precision:(auto fp32 int8)'
  '--preload[load the model before "listening" is printed]'
  '--host=[bind address]:host:_hosts'
  '--port=[port]:port: '
  '--base-url=[the {base_url} of result URLs]:url:_urls'
  '--workers=[inference jobs run at once]:n: '
  '--queue-limit=[jobs waiting before /jobs answers 503 gpu_unavailable]:n: '
  '--sync-timeout=[hard timeout of POST /api/v1/remove]:ms: '
  '--rate-limit=[requests per minute per key]:n: '
  '--result-ttl=[how long results can be downloaded]:seconds: '
  '--callback-backoff=[first callback retry delay, doubling each retry]:ms: '
  '--allow-private-network[let image_url and callback URLs reach loopback and private addresses]'
  '--no-playground[do not serve the web playground page at /]'
  '--no-removebg[do not answer remove.bg'"'"'s API]'
  '--no-photoroom[do not answer Photoroom'"'"'s API]'
  '--no-clipdrop[do not answer Clipdrop'"'"'s API (POST /remove-background/v1)]'
  '--no-metrics[do not serve Prometheus metrics at /metrics]'
  '--metrics-port=[serve /metrics on a listener of its own on this port, not on the API port]:port: '
  '--metrics-host=[bind address of the --metrics-port listener]:host:_hosts'
  '--log-level=[lowest level of the JSON request log on stdout: trace, debug, info, warn, error, fatal or silent]:level:(trace debug info warn error fatal silent)'
  '--admin-token=[turn on the admin API under /api/v1/admin/]:token: '
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
  '--results=[keep result images in an S3-compatible object store, s3://BUCKET\[/PREFIX\], configured by the AWS SDK'"'"'s variables]:url:_urls'
  '--results-path-style[path-style addressing for the object store of --results]'
  '--results-redirect[GET /api/v1/results/{id} answers 302 to a presigned URL of the object store]'
  '--lease-ms=[how long a claimed job stays with its server without a renewal]:ms: '
  '--upstream=[run the model on an Open Inference Protocol v2 server]:url:_urls'
  '--upstream-model=[the model'"'"'s name on the upstream]:name: '
  '--upstream-token=[sent to the upstream as "Authorization: Bearer TOKEN"]:token: '
  '--no-exit-with-parent[keep serving when the process that started serve exits]'
)
_cutout_opts_model_server=(
  '--data=[data directory: the SQLite database, results, generated secrets]:dir:_directories'
  '--config=[config file]:file:_files'
  '--model=[the model]:name or file:_files'
  '--inference-workers=[inference worker threads, each with its own session]:n: '
  '--inference-threads=[intra-op threads of each session]:n: '
  '--precision=[auto | fp32 | int8: the default precision]:precision:(auto fp32 int8)'
  '--host=[bind address]:host:_hosts'
  '--port=[port]:port: '
  '--token=[require "Authorization: Bearer TOKEN" on every endpoint but /v2/health/*]:token: '
)
_cutout_opts_keys_create=(
  '--name=[a label for the key]:text: '
  '--test[a cut_test_ key: never charged, results capped to preview size]'
  '--account=[add the key to this account instead of opening a new one]:id: '
  '--expires-at=[refuse the key from this time on]:time: '
  '--rate-limit=[the key'"'"'s own requests per minute, in place of the server'"'"'s --rate-limit]:n: '
  '--label=[a label of the key (repeat for more)]:name=value: '
  '--json[print {"id", "key", "account", "credits"}]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_keys_list=(
  '--json[one JSON object per key]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_keys_revoke=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_credits_add=(
  '--reason=[why, kept with the ledger row and in the audit trail]:text: '
  '--json[print {"account", "balance"}]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_account=(
  '--key=[the account of this key]:api_key: '
  '--json[the JSON of GET /api/v1/account]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_usage=(
  '--key=[the account of this key]:api_key: '
  '--json[the JSON of GET /api/v1/usage]'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
  '--store=[where state lives: postgres://USER\[:PASS\]@HOST\[:PORT\]/DB shared by a fleet]:url:_urls'
)
_cutout_opts_openapi=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
)
_cutout_opts_health=(
  '--url=[the server'"'"'s base URL, or a probe URL with its path]:url:_urls'
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
)
_cutout_opts_completion=(
  '--data=[data directory]:dir:_directories'
  '--config=[config file]:file:_files'
)
# <<< command flags

_cutout_remove_opts=($_cutout_image_opts $_cutout_opts_remove)

_cutout_commands() {
  local -a commands
  commands=(
    'remove:remove backgrounds locally (the default command)'
    'serve:run the v1 HTTP API'
    'model-server:serve the model over the Open Inference Protocol v2'
    'keys:create, list and revoke API keys'
    'credits:add purchased credits'
    'account:credit balance and plan'
    'usage:credits used per day'
    'models:list, verify and pull models'
    'openapi:print the OpenAPI 3.1.0 document'
    "health:ask a running server's /readyz (exit 0 when ready)"
    'completion:print a shell completion script'
    'help:show help for a command'
  )
  _describe -t commands 'cutout command' commands
}

_cutout() {
  local curcontext=$curcontext state state_descr line ret=1
  typeset -A opt_args

  _arguments -C -S \
    $_cutout_help_opts \
    $_cutout_remove_opts \
    '(- *)'{-V,--version}'[show the version]' \
    '1: :->first' \
    '*:: :->rest' && ret=0

  case $state in
    first)
      # `cutout photo.jpg` means `cutout remove photo.jpg`: offer commands and inputs
      _alternative 'commands: :_cutout_commands' 'files:input:_files' && ret=0
      ;;
    rest)
      local cmd=${line[1]}
      curcontext=${curcontext%:*:*}:cutout-$cmd:
      case $cmd in
        remove)
          _arguments -S $_cutout_help_opts $_cutout_remove_opts '*:input:_files' && ret=0
          ;;
        # each command's flags, generated above
        serve) _arguments -S $_cutout_help_opts $_cutout_opts_serve && ret=0 ;;
        model-server) _arguments -S $_cutout_help_opts $_cutout_opts_model_server && ret=0 ;;
        account) _arguments -S $_cutout_help_opts $_cutout_opts_account && ret=0 ;;
        usage) _arguments -S $_cutout_help_opts $_cutout_opts_usage && ret=0 ;;
        openapi) _arguments -S $_cutout_help_opts $_cutout_opts_openapi && ret=0 ;;
        health) _arguments -S $_cutout_help_opts $_cutout_opts_health && ret=0 ;;
        keys)
          state=
          _arguments -C $_cutout_help_opts '1:keys command:((create\:"create a key" list\:"list keys" revoke\:"revoke a key"))' \
            '*:: :->keys' && ret=0
          [[ $state == keys ]] && case $line[1] in
            create) _arguments -S $_cutout_help_opts $_cutout_opts_keys_create && ret=0 ;;
            list) _arguments -S $_cutout_help_opts $_cutout_opts_keys_list && ret=0 ;;
            revoke) _arguments -S $_cutout_help_opts $_cutout_opts_keys_revoke '1:key id: ' && ret=0 ;;
          esac
          ;;
        credits)
          state=
          _arguments -C $_cutout_help_opts '1:credits command:((add\:"add purchased credits"))' '*:: :->credits' && ret=0
          [[ $state == credits && $line[1] == add ]] && _arguments -S $_cutout_help_opts $_cutout_opts_credits_add \
            '1:account or key id: ' '2:amount: ' && ret=0
          ;;
        models)
          state=
          _arguments -C $_cutout_help_opts \
            '1:models command:((list\:"known models" verify\:"check presence and checksums" pull\:"assemble a model and build its quality variants" export\:"write a Triton model repository"))' \
            '*:: :->models' && ret=0
          [[ $state == models ]] && case $line[1] in
            list) _arguments -S $_cutout_help_opts $_cutout_opts_models_list && ret=0 ;;
            verify) _arguments -S $_cutout_help_opts $_cutout_opts_models_verify '1:model name: ' && ret=0 ;;
            pull) _arguments -S $_cutout_help_opts $_cutout_opts_models_pull '1:model name: ' && ret=0 ;;
            export) _arguments -S $_cutout_help_opts $_cutout_opts_models_export '1:model name: ' && ret=0 ;;
          esac
          ;;
        completion)
          _arguments -S $_cutout_help_opts $_cutout_opts_completion '1:shell:(bash zsh fish)' && ret=0
          ;;
        help)
          _arguments '1: :_cutout_commands' && ret=0
          ;;
        *)
          # implicit remove: the first word was an input
          _arguments -S $_cutout_help_opts $_cutout_remove_opts '*:input:_files' && ret=0
          ;;
      esac
      ;;
  esac
  return ret
}

if [[ $funcstack[1] == _cutout ]]; then
  # autoloaded from $fpath: this file is the body of _cutout, which just redefined itself
  _cutout "$@"
else
  # sourced, e.g. `source <(cutout completion zsh)`
  compdef _cutout cutout
fi
