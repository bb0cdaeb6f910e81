#compdef cutout
#
# zsh completion for cutout
#
# Install: copy this file as `_cutout` into a directory of $fpath (before compinit runs), or run:
#   source <(cutout completion zsh)

_cutout_global_opts=(
  '--data=[data directory (database and results)]:directory:_directories'
  '--config=[configuration file]:file:_files'
  '(- *)'{-h,--help}'[show help]'
)

# >>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit
_cutout_image_opts=(
  '--size=[output size]:size:(preview full auto)'
  '--format=[output encoding]:format:(png webp jpg auto zip)'
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
  '--shadow[accepted for remove.bg compatibility; no shadow is drawn]'
)
# <<< image flags

_cutout_remove_opts=(
  '(-o --out)'{-o+,--out=}'[output directory or file; - for stdout]:output:_files'
  $_cutout_image_opts
  '(-c --concurrency)'{-c+,--concurrency=}'[images processed at once]:number: '
  '--inference-workers=[inference worker threads, each with its own session]:number: '
  '--inference-threads=[intra-op threads of each session]:number: '
  '--model=[model name or .onnx file]:model:_files'
  '--review-below[flag cutouts whose confidence is below T]:confidence (0..1):'
  '--include-outputs[take named files like x.cutout.png as inputs too]'
  '(--overwrite)--skip-existing[skip inputs whose output exists]'
  '(--skip-existing)--overwrite[overwrite existing outputs]'
  '--json[one JSON object per input on stdout]'
  '--key=[charge this API key'"'"'s credits]:API key: '
  '(-q --quiet)'{-q,--quiet}'[no spinner or progress bar]'
  '--no-progress[no spinner or progress bar]'
  '--recursive[descend into directories]'
  '--manifest=[JSON-lines record; a rerun skips unchanged inputs]:manifest:_files'
  '--force[with --manifest: redo every input]'
  '--watch[keep watching the input folders for new images]'
  '*--exclude=[leave out matching inputs (repeatable)]:glob: '
  '--dry-run[print what would be processed and skipped; write nothing]'
  '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: '
)

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
    $_cutout_global_opts \
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
          _arguments -S $_cutout_global_opts $_cutout_remove_opts '*:input:_files' && ret=0
          ;;
        serve)
          _arguments -S $_cutout_global_opts \
            '--host=[bind address]:host:_hosts' \
            '--port=[port; 0 picks a free one]:port: ' \
            '--preload[load the model before listening; /readyz is 503 until it is loaded]' \
            '--base-url=[base URL of result URLs]:URL:_urls' \
            '--workers=[inference jobs run at once]:number: ' \
            '--queue-limit=[jobs waiting before 503]:number: ' \
            '--sync-timeout=[sync hard timeout]:milliseconds: ' \
            '--rate-limit=[requests per minute per key]:number: ' \
            '--result-ttl=[result retention]:seconds: ' \
            '--callback-backoff=[first callback retry delay]:milliseconds: ' \
            '--allow-private-network[let URLs reach private addresses]' \
            '--no-playground[do not serve the playground page]' \
            "--no-removebg[do not answer remove.bg's and rembg's APIs]" \
            "--no-photoroom[do not answer Photoroom's API]" \
            "--no-clipdrop[do not answer Clipdrop's API]" \
            '--no-metrics[do not serve /metrics]' \
            '--no-exit-with-parent[keep serving when the parent process exits]' \
            '--metrics-port=[serve /metrics on a listener of its own]:port: ' \
            '--metrics-host=[bind address of the metrics listener]:host:_hosts' \
            '--log-level=[lowest level of the request log]:level:(trace debug info warn error fatal silent)' \
            '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' \
            '--lease-ms=[how long a claimed job stays with a silent server]:milliseconds: ' \
            '--results=[object store for result images, s3 URL]:URL: ' \
            '--results-path-style[path-style addressing for the object store]' \
            '--results-redirect[answer result reads with a presigned URL of the object store]' \
            '--model=[model name or .onnx file]:model:_files' \
            '--upstream=[Open Inference Protocol server that runs the model]:URL:_urls' \
            '--upstream-model=[the model'"'"'s name on the upstream]:name: ' \
            '--upstream-token=[bearer token sent to the upstream]:token: ' \
            '--precision=[default model number format]:precision:(auto fp32 int8)' \
            '--inference-workers=[inference worker threads, each with its own session]:number: ' \
            '--inference-threads=[intra-op threads of each session]:number: ' && ret=0
          ;;
        model-server)
          _arguments -S $_cutout_global_opts \
            '--host=[bind address]:host:_hosts' \
            '--port=[port; 0 picks a free one]:port: ' \
            '--model=[model name or .onnx file]:model:_files' \
            '--precision=[models served: fp32 as NAME, int8 as NAME-int8]:precision:(auto fp32 int8)' \
            '--token=[bearer token required on all but /v2/health]:token: ' \
            '--inference-workers=[inference worker threads, each with its own session]:number: ' \
            '--inference-threads=[intra-op threads of each session]:number: ' && ret=0
          ;;
        keys)
          state=
          _arguments -C $_cutout_global_opts '1:keys command:((create\:"create a key" list\:"list keys" revoke\:"revoke a key"))' \
            '*:: :->keys' && ret=0
          [[ $state == keys ]] && case $line[1] in
            create)
              _arguments -S $_cutout_global_opts \
                '--name=[name of the key]:name: ' \
                '--test[create a test key]' \
                '--account=[add the key to this account]:account id: ' \
                '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' \
                '--json[print JSON]' && ret=0
              ;;
            list) _arguments -S $_cutout_global_opts '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' '--json[print JSON]' && ret=0 ;;
            revoke) _arguments -S $_cutout_global_opts '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' '1:key id: ' && ret=0 ;;
          esac
          ;;
        credits)
          _arguments -S $_cutout_global_opts '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' '1:credits command:((add\:"add purchased credits"))' \
            '2:account or key id: ' '3:amount: ' && ret=0
          ;;
        account | usage)
          _arguments -S $_cutout_global_opts '--key=[API key]:API key: ' '--json[print JSON]' '--store=[PostgreSQL URL shared by a fleet (default: SQLite in the data directory)]:URL: ' && ret=0
          ;;
        models)
          _arguments -S $_cutout_global_opts \
            '1:models command:((list\:"known models" verify\:"check presence and checksums" pull\:"assemble a model and build its quality variants" export\:"write a Triton model repository"))' \
            '--json[print JSON (list, verify)]' '--no-variants[pull, export: skip the quality variants]' \
            '--triton=[export: the Triton model repository to write]:directory:_directories' && ret=0
          ;;
        openapi)
          _arguments -S $_cutout_global_opts && ret=0
          ;;
        health)
          _arguments -S $_cutout_global_opts '--url=[the server'"'"'s base URL (default http://127.0.0.1:PORT)]:URL:_urls' && ret=0
          ;;
        completion)
          _arguments -S $_cutout_global_opts '1:shell:(bash zsh fish)' && ret=0
          ;;
        help)
          _arguments '1: :_cutout_commands' && ret=0
          ;;
        *)
          # implicit remove: the first word was an input
          _arguments -S $_cutout_global_opts $_cutout_remove_opts '*:input:_files' && ret=0
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
